"""Configuration: the settings model every service receives (settings, sections,
maintenance), reading files (files, seed, connector_keys, key_values, java_properties).
"""
