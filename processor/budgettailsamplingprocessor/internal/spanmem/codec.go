package spanmem // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"

import (
	"fmt"

	"github.com/klauspost/compress/s2"
)

// Codec turns a fragment's encoding into what the buffer holds, and back.
// With compression off, a chunk is the encoding itself. With S2, a chunk is
// a header byte then the S2 block, or the encoding as is when S2 would not
// make it smaller (fragments of a span or two).
type Codec struct{ compress bool }

// NewCodec returns the codec; compress selects S2.
func NewCodec(compress bool) Codec { return Codec{compress: compress} }

// Compresses reports whether chunks are S2 copies (never in a slab).
func (c Codec) Compresses() bool { return c.compress }

const (
	chunkStored byte = iota // the encoding follows as is
	chunkS2                 // an S2 block of the encoding follows
)

// Store returns what the buffer holds of an encoded fragment; encoded is
// not used afterwards, scratch is the caller's buffer for S2's worst case,
// reused across calls. Called without locks: when compressing, it is most
// of a fragment's cost.
func (c Codec) Store(encoded []byte, scratch *[]byte) []byte {
	if !c.compress {
		return encoded
	}
	block := s2.Encode((*scratch)[:cap(*scratch)], encoded)
	*scratch = block
	chunk := make([]byte, 1+min(len(block), len(encoded)))
	if len(block) >= len(encoded) {
		chunk[0] = chunkStored
		copy(chunk[1:], encoded)
	} else {
		chunk[0] = chunkS2
		copy(chunk[1:], block)
	}
	return chunk
}

// Load returns the encoding of a stored chunk.
func (c Codec) Load(chunk []byte) ([]byte, error) {
	if !c.compress {
		return chunk, nil
	}
	if len(chunk) == 0 {
		return nil, fmt.Errorf("empty chunk")
	}
	switch chunk[0] {
	case chunkStored:
		return chunk[1:], nil
	case chunkS2:
		return s2.Decode(nil, chunk[1:])
	}
	return nil, fmt.Errorf("unknown chunk header %d", chunk[0])
}
