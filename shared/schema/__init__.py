"""Table schemas: the DDL parsed (table_schema), Avro writer schemas by id (registry),
and a table schema from an Avro schema (avro_ddl).
"""
