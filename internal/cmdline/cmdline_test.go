package cmdline

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidatingIsTheValidateCommand(t *testing.T) {
	assert.True(t, validating([]string{"otelcol-cost", "validate", "--config", "configs/tail.yaml"}))
	assert.True(t, validating([]string{"otelcol-cost", "--config=configs/tail.yaml", "validate"}))
	assert.False(t, validating([]string{"otelcol-cost", "--config", "configs/tail.yaml"}))
	assert.False(t, validating([]string{"otelcol-cost"}))
	assert.False(t, Validating(), "a test binary is not validate")
}
