package otlpwire

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A request's encoding that is not as pdata writes it is refused whole,
// never half split.
func TestUnexpectedEncodingLayoutIsRefused(t *testing.T) {
	var w Index
	for name, buf := range map[string][]byte{
		"truncated length":         {0x0a, 0x05, 0x12},
		"field between its scopes": {0x0a, 0x06, 0x12, 0x00, 0x1a, 0x00, 0x12, 0x00},
		"bad tag":                  {0x0a, 0x01, 0x00},
	} {
		err := w.Parse(buf)
		assert.ErrorIs(t, err, ErrUnexpectedEncoding, name)
	}
}
