"""Where an object store's credentials come from: resolved here, once, for every client the
sink opens on a table (``obstore`` for its own reads and writes, hudi-rs for ``table read``).

``object_store`` (under both) reads the standard variables (``AWS_ACCESS_KEY_ID`` …) itself,
then web identity, then the instance metadata service; it does not read ``~/.aws``. An
operator with a profile (``aws configure``) saw every command go to the metadata service and
fail with a Rust debug dump. So, for ``s3://``, as the AWS SDKs do:

1. ``aws_access_key_id``/``aws_secret_access_key`` in the options (``table.storage_options``,
   ``--storage-option``);
2. ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` in the environment;
3. a profile: ``aws_profile`` in the options, else ``AWS_PROFILE`` (``AWS_DEFAULT_PROFILE``),
   else ``default`` — its static keys from ``~/.aws/credentials`` (``AWS_SHARED_CREDENTIALS_FILE``)
   or ``~/.aws/config`` (``AWS_CONFIG_FILE``, section ``[profile NAME]``), with its ``region``
   and ``endpoint_url`` where neither the options nor the environment name one. The implicit
   ``default`` profile yields to web identity and container credentials set in the
   environment (an EKS pod's IRSA), as in the SDKs;
4. what ``object_store`` finds on its own: web identity, container credentials, the instance
   metadata service.

A profile named explicitly that is missing, or that holds no static keys (``role_arn``, SSO,
``credential_process``: not read here), is a ``ConfigError`` naming where it was named.
When nothing provides credentials ``object_store`` ends at the metadata service, and its
failure there is what :func:`is_credentials_lookup_failure` recognises; :func:`no_credentials`
then says, in one line, which credentials are missing and where they were looked for.
"""

from __future__ import annotations

import configparser
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from hudi_sink.shared.errors import ConfigError

__all__ = ["resolve_options", "is_credentials_lookup_failure", "no_credentials", "half_pair",
           "PROFILE_OPTION", "needs_metadata_service", "probe_metadata_service",
           "credential_source"]

PROFILE_OPTION = "aws_profile"
"""An option naming the profile (``--storage-option aws_profile=prod``); not an object_store
key, so it is consumed here and never passed on."""

_KEY_ID, _SECRET, _TOKEN = "aws_access_key_id", "aws_secret_access_key", "aws_session_token"
_PROFILE_KEYS = {_KEY_ID: _KEY_ID, _SECRET: _SECRET, _TOKEN: _TOKEN,
                 "region": "aws_region", "endpoint_url": "aws_endpoint_url"}
"""Profile setting → object_store option."""
_ENV_FOR = {
    _KEY_ID: ("AWS_ACCESS_KEY_ID",), _SECRET: ("AWS_SECRET_ACCESS_KEY",),
    _TOKEN: ("AWS_SESSION_TOKEN",), "aws_region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "aws_endpoint_url": ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT"),
}
"""object_store option → the variables that set it (a profile never overrides them)."""
_ALIASES = {
    _KEY_ID: (_KEY_ID, "access_key_id"),
    _SECRET: (_SECRET, "secret_access_key"),
    _TOKEN: (_TOKEN, "aws_token", "session_token", "token"),
    "aws_region": ("aws_region", "region", "aws_default_region", "default_region"),
    "aws_endpoint_url": ("aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint",
                         "aws_endpoint_url_s3"),
}
"""object_store option → every spelling object_store reads as it (``AmazonS3ConfigKey``), so
``endpoint`` given in the options counts as an endpoint and a profile's ``endpoint_url`` is
not added beside it as ``aws_endpoint_url`` (two keys, one silently winning). Regions count as
one: object_store takes ``default_region`` when ``region`` is unset."""
_AMBIENT = ("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI")
"""Variables of the credential sources that come before the implicit default profile."""
_METADATA_MARKERS = ("/latest/api/token", "/latest/meta-data/iam/security-credentials",
                     "169.254.169.254", "fd00:ec2::254")


def _aws_path(environ: Mapping[str, str], variable: str, name: str) -> Path:
    given = environ.get(variable)
    return Path(given).expanduser() if given else Path.home() / ".aws" / name


def _read_profile(environ: Mapping[str, str], profile: str) -> tuple[dict[str, str], bool]:
    """(settings, found): ``profile`` from the credentials file over the config file."""
    settings: dict[str, str] = {}
    found = False
    for variable, name, section in (
            ("AWS_CONFIG_FILE", "config", profile if profile == "default" else f"profile {profile}"),
            ("AWS_SHARED_CREDENTIALS_FILE", "credentials", profile)):
        parser = configparser.RawConfigParser()
        try:
            parser.read(_aws_path(environ, variable, name), encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {_aws_path(environ, variable, name)}: "
                              f"{type(exc).__name__}", variable) from None
        if parser.has_section(section):
            found = True
            settings.update({k.lower(): v.strip() for k, v in parser.items(section)})
    return settings, found


def _given(options: Mapping[str, str], option: str) -> str | None:
    """The value ``options`` give ``option`` under any of its spellings (first one set)."""
    return next((options[a] for a in _ALIASES.get(option, (option,)) if options.get(a)), None)


def _is_set(options: Mapping[str, str], environ: Mapping[str, str], option: str) -> bool:
    return bool(_given(options, option)) or any(environ.get(v) for v in _ENV_FOR.get(option, ()))


def resolve_options(scheme: str, options: Mapping[str, str],
                    environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``options`` (lower-cased keys) completed from an AWS profile where neither they nor the
    environment give credentials (see the module docstring); unchanged for other schemes."""
    env = os.environ if environ is None else environ
    resolved = {k.lower(): str(v) for k, v in options.items()}
    named = resolved.pop(PROFILE_OPTION, None)
    if scheme != "s3":
        return resolved
    if _is_set(resolved, env, _KEY_ID) or _is_set(resolved, env, _SECRET):
        return resolved  # keys given (half a pair is named by no_credentials, not guessed at)
    where = (f"--storage-option/table.storage_options {PROFILE_OPTION}" if named
             else "AWS_PROFILE" if env.get("AWS_PROFILE")
             else "AWS_DEFAULT_PROFILE" if env.get("AWS_DEFAULT_PROFILE") else None)
    profile = named or env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or "default"
    if where is None and any(env.get(v) for v in _AMBIENT):
        return resolved  # web identity / container credentials come first
    settings, found = _read_profile(env, profile)
    if where is not None and not found:
        raise ConfigError(f"AWS profile {profile!r} is in neither "
                          f"{_aws_path(env, 'AWS_SHARED_CREDENTIALS_FILE', 'credentials')} nor "
                          f"{_aws_path(env, 'AWS_CONFIG_FILE', 'config')}", where)
    if not (settings.get(_KEY_ID) and settings.get(_SECRET)):
        if where is not None:
            raise ConfigError(
                f"AWS profile {profile!r} holds no aws_access_key_id/aws_secret_access_key "
                "(role_arn, SSO and credential_process profiles are not read by the sink): "
                f"export its credentials, e.g. eval \"$(aws configure export-credentials "
                f"--profile {profile} --format env)\"", where)
        return resolved
    for setting, option in _PROFILE_KEYS.items():
        if settings.get(setting) and not _is_set(resolved, env, option):
            resolved[option] = settings[setting]
    return resolved


def credential_source(scheme: str, options: Mapping[str, str],
                      environ: Mapping[str, str] | None = None) -> str:
    """Which credentials and endpoint an ``s3://`` store uses, for the log at start (never a
    key or secret): an operator whose writes go to the wrong account or endpoint sees why."""
    env = os.environ if environ is None else environ
    if scheme != "s3":
        return f"{scheme}: credentials as object_store reads them"
    given = {k.lower(): str(v) for k, v in options.items()}
    resolved = resolve_options(scheme, given, env)
    profile = (given.get(PROFILE_OPTION) or env.get("AWS_PROFILE")
               or env.get("AWS_DEFAULT_PROFILE") or "default")
    if _given(given, _KEY_ID):
        source = "the storage options (aws_access_key_id)"
    elif any(env.get(v) for v in _ENV_FOR[_KEY_ID]):
        source = "the environment (AWS_ACCESS_KEY_ID)"
    elif _given(resolved, _KEY_ID):
        source = f"AWS profile {profile!r}"
    elif any(env.get(v) for v in _AMBIENT):
        source = "web identity / container credentials (" + ", ".join(
            v for v in _AMBIENT if env.get(v)) + ")"
    else:
        source = "the instance metadata service (nothing else gave any)"
    endpoint = (_given(resolved, "aws_endpoint_url")
                or next((env[v] for v in _ENV_FOR["aws_endpoint_url"] if env.get(v)), None)
                or "AWS's endpoint of the region")
    return f"credentials from {source}; endpoint {endpoint}"


def needs_metadata_service(scheme: str, options: Mapping[str, str],
                           environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``object_store`` would have only the instance metadata service to ask: an
    ``s3://`` store with no keys (options, environment, profile) and no web identity or
    container credentials. (ConfigError for a named profile it cannot use.)"""
    env = os.environ if environ is None else environ
    if scheme != "s3" or any(env.get(v) for v in _AMBIENT):
        return False
    resolved = resolve_options(scheme, options, env)
    return not (_is_set(resolved, env, _KEY_ID) or _is_set(resolved, env, _SECRET))


def probe_metadata_service(environ: Mapping[str, str] | None = None,
                           timeout_s: float = 1.0) -> str | None:
    """None when the instance metadata service hands out a session token (IMDSv2, as
    object_store asks); else why not. One attempt of ``timeout_s``, as the AWS SDKs default
    to: off EC2 the address often drops packets, and object_store would retry for a minute."""
    env = os.environ if environ is None else environ
    endpoint = (env.get("AWS_METADATA_ENDPOINT") or "http://169.254.169.254").rstrip("/")
    request = urllib.request.Request(  # noqa: S310 - http(s) endpoint of the metadata service
        f"{endpoint}/latest/api/token", method="PUT",
        headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # noqa: S310
            return None if answer.status == 200 else f"{endpoint} answered {answer.status}"
    except urllib.error.HTTPError as exc:
        return f"{endpoint} answered {exc.code} {exc.reason}"
    except (OSError, ValueError) as exc:
        return f"{endpoint} did not answer within {timeout_s:g} s ({exc})"


def is_credentials_lookup_failure(text: str) -> bool:
    """Whether a store error is ``object_store`` failing to get credentials from the instance
    metadata service — where it ends up when nothing else provided any."""
    return any(marker in text for marker in _METADATA_MARKERS)


def half_pair(options: Mapping[str, str], environ: Mapping[str, str] | None = None) -> str | None:
    """Which half of the key pair is missing when only one is set (object_store then refuses
    to open the store: ``Missing SecretAccessKey``), else None."""
    env = os.environ if environ is None else environ
    given = {k.lower(): v for k, v in options.items()}
    have_id, have_secret = _is_set(given, env, _KEY_ID), _is_set(given, env, _SECRET)
    if have_id == have_secret:
        return None
    missing, present = (_SECRET, _KEY_ID) if have_id else (_KEY_ID, _SECRET)
    return (f"{missing} (or {_ENV_FOR[missing][0]}) is missing while {present} "
            f"(or {_ENV_FOR[present][0]}) is set")


def no_credentials(root: str, options: Mapping[str, str], environ: Mapping[str, str] | None,
                   cause: str) -> str:
    """One line: which credentials ``root`` lacks and where they were looked for."""
    env = os.environ if environ is None else environ
    given = {k.lower(): v for k, v in options.items()}
    what = half_pair(given, env)
    if what is None:
        profile = (given.get(PROFILE_OPTION) or env.get("AWS_PROFILE")
                   or env.get("AWS_DEFAULT_PROFILE") or "default")
        what = ("none given as aws_access_key_id/aws_secret_access_key (--storage-option, "
                "table.storage_options), as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or in "
                f"AWS profile {profile!r} "
                f"({_aws_path(env, 'AWS_SHARED_CREDENTIALS_FILE', 'credentials')}; AWS_PROFILE "
                "picks another)")
    reason = cause.split("\n", 1)[0].strip()
    return (f"no credentials for {root}: {what}; the instance metadata service gave none either"
            f" ({reason[:200]})")
