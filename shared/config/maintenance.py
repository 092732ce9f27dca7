"""The ``maintenance`` config section (re-exported by ``shared.config.settings``): clustering,
cleaning and archival the leading coordinator runs beside ingestion."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ArchivalConfig", "CleanerConfig", "ClusteringConfig", "MaintenanceConfig"]


class ClusteringConfig(BaseModel):
    """Small-file clustering (a ``replacecommit`` rewriting small file groups).

    Off unless asked for: readers that follow only ``.commit`` instants (daft 0.7.26's Hudi
    reader) do not honour a ``replacecommit`` and read a clustered table's rows twice, the
    replaced files and their rewrite. Write-time file sizing (``table.small_file_bytes``)
    keeps files few without one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    min_files: int = Field(10, ge=2)
    """A table partition is clustered once it holds more small files than this."""
    small_file_bytes: int = Field(104857600, ge=1)
    target_file_bytes: int = Field(134217728, ge=1)
    interval_s: float = Field(10, ge=0.1)
    """How often the leader looks for work (and runs cleaning and archival)."""

    @model_validator(mode="after")
    def _sizes(self) -> ClusteringConfig:
        if self.target_file_bytes < self.small_file_bytes:
            raise ValueError(f"target_file_bytes ({self.target_file_bytes}) must be >= "
                             f"small_file_bytes ({self.small_file_bytes})")
        return self


class CleanerConfig(BaseModel):
    """Cleaning of replaced file groups (Hudi's KEEP_LATEST_COMMITS retention)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    commits_retained: int = Field(10, ge=1)


class ArchivalConfig(BaseModel):
    """Timeline archival (Hudi's defaults: archive down to 20 once over 30 instants)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    max_instants: int = Field(30, ge=2)
    min_instants: int = Field(20, ge=2)

    @model_validator(mode="after")
    def _bounds(self) -> ArchivalConfig:
        if not 2 <= self.min_instants < self.max_instants:
            raise ValueError(f"need 2 <= min_instants ({self.min_instants}) < max_instants "
                             f"({self.max_instants})")
        return self


class MaintenanceConfig(BaseModel):
    """Table services the leading coordinator runs beside ingestion (never blocking it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    clustering: ClusteringConfig = Field(default_factory=ClusteringConfig)
    cleaner: CleanerConfig = Field(default_factory=CleanerConfig)
    archival: ArchivalConfig = Field(default_factory=ArchivalConfig)

    @model_validator(mode="after")
    def _cleaner_for_clustering(self) -> MaintenanceConfig:
        if self.clustering.enabled and not self.cleaner.enabled:
            raise ValueError("clustering.enabled needs cleaner.enabled: replaced files are only "
                             "removed by the cleaner, and archival waits for them")
        return self
