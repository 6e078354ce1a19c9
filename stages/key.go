package stages

// FNV-1a, 64-bit: the hash of full_key. It only needs to be stable and to
// spread distinct identities; it is not a content hash.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	h ^= 0xff // terminator: "ab"+"c" differs from "a"+"bc"
	h *= fnvPrime
	return h
}

func fnvU64(h, v uint64) uint64 {
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= fnvPrime
		v >>= 8
	}
	return h
}

// FullKey is hash(orchestration identity, graph key, every construction
// value): two calls share a Definition only if all three agree.
func FullKey(orchestration, key string, config []uint64) uint64 {
	return fullKeyFrom(fnvString(fnvOffset, orchestration), key, config)
}

// fullKeyFrom is FullKey with the identity's part already hashed: a model's
// identity carries its file's content hash, hashed once per pass rather than
// once per Graph call.
func fullKeyFrom(identity uint64, key string, config []uint64) uint64 {
	h := fnvString(identity, key)
	h = fnvU64(h, uint64(len(config)))
	for _, v := range config {
		h = fnvU64(h, v)
	}
	return h
}
