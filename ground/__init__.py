"""The ground floor: what every layer imports and which imports no layer — the configuration's values
(config), queue names (queues), Redis' connection (redis) and key families (keys), logging (logs) and the
metric series (metrics). Nothing here imports jeeves, wire_bridge, retrieval, pipeline or knowledge
(`.importlinter`, tests/test_layers.py)."""
