package stream

// Reader yields an endless pseudo-random stream (xorshift64*), the same
// for every Reader.
type Reader struct {
	x   uint64
	buf [8]byte
	n   int
}

// New returns a Reader at the start of the stream.
func New() *Reader { return &Reader{x: 0x9e3779b97f4a7c15} }

// Read fills p with the next bytes of the stream; it never fails.
func (r *Reader) Read(p []byte) (int, error) {
	for i := range p {
		if r.n == 0 {
			r.x ^= r.x >> 12
			r.x ^= r.x << 25
			r.x ^= r.x >> 27
			v := r.x * 0x2545f4914f6cdd1d
			for j := 0; j < 8; j++ {
				r.buf[j] = byte(v >> (8 * j))
			}
			r.n = 8
		}
		p[i] = r.buf[8-r.n]
		r.n--
	}
	return len(p), nil
}
