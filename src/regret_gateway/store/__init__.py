"""The SQL store: schema, validated records, repository functions, migrations and the batched writer."""
