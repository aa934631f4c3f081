"""The ground floor: what every layer imports and which imports no layer — the configuration's values
(config), queue names (queues), Redis' connection (redis) and key families (keys), logging (logs), the
metric series (metrics) and the plain English replies share (wording: numbers in words, "a, b and c").
Nothing here imports jeeves, wire_bridge, retrieval, pipeline or knowledge (`.importlinter`,
tests/test_layers.py)."""
