"""Configuration: the settings model every service receives (settings, sections,
maintenance), reading files (files, seed, java_properties).
"""
