/** The bench portals' link-signing keys: set, as a deployment sets them, so none warns of a random key at start. */
export const BENCH_SIGNING_KEYS = ['a-signing-key-of-the-bench-0123456789'];
