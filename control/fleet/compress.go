package fleet

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
)

// The config key holds the document as TOML, or gzip-compressed when it
// is large: etcd refuses a request over 1.5 MiB by default
// (--max-request-bytes), and 1,000 VIPs of 100 backends each are about
// 5 MB of TOML, some 300 KB compressed. One key, never split: a box must
// never see half a configuration.

// CompressAbove is the size from which Push stores the document
// compressed.
const CompressAbove = 256 << 10

// MaxValue is the largest value Push writes: etcd's default request limit
// (1.5 MiB), less room for the key and the request's framing.
const MaxValue = 1536<<10 - 4<<10

// MaxDocument bounds a document decompressed: far above what fits in
// MaxValue compressed from any real configuration, and a limit on what a
// crafted value can make a box allocate.
const MaxDocument = 256 << 20

// gzipMagic starts every gzip stream; no TOML document starts with it.
var gzipMagic = []byte{0x1f, 0x8b}

// EncodeConfig returns the config key's value for doc: doc itself, or
// compressed when it is CompressAbove or more. It fails when even that is
// over MaxValue.
func EncodeConfig(doc []byte) ([]byte, error) {
	if len(doc) < CompressAbove {
		return doc, nil
	}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zw.Write(doc)
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if b.Len() > MaxValue {
		return nil, fmt.Errorf("the document is %d bytes, %d compressed: over the %d bytes one etcd request may carry (etcd's --max-request-bytes default); split the fleet", len(doc), b.Len(), MaxValue)
	}
	return b.Bytes(), nil
}

// DecodeConfig returns the document a config key's value holds.
func DecodeConfig(v []byte) ([]byte, error) {
	if !bytes.HasPrefix(v, gzipMagic) {
		return bytes.Clone(v), nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(v))
	if err != nil {
		return nil, fmt.Errorf("the config key's compressed value: %w", err)
	}
	doc, err := io.ReadAll(io.LimitReader(zr, MaxDocument+1))
	if err != nil {
		return nil, fmt.Errorf("the config key's compressed value: %w", err)
	}
	if len(doc) > MaxDocument {
		return nil, fmt.Errorf("the config key's compressed value holds over %d bytes", MaxDocument)
	}
	return doc, nil
}
