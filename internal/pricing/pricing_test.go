package pricing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResolveAppliesOverrides(t *testing.T) {
	price, ratio := 2.5, 4.0
	ret := 48 * time.Hour
	m := Config{Preset: PresetSaaSIndexed, PerMillionSpans: &price, CompressionRatio: &ratio, Retention: &ret, Currency: "EUR"}.Resolve()
	assert.Equal(t, 2.5, m.PerMillionSpans)
	assert.Equal(t, 0.10, m.PerGiBIngested, "kept from the preset")
	assert.Equal(t, 4.0, m.CompressionRatio)
	assert.Equal(t, ret, m.Retention)
	assert.Equal(t, "EUR", m.Currency)
}

func TestCostFormula(t *testing.T) {
	m := Model{PerGiBIngested: 1, PerMillionSpans: 2, PerGiBMonthStored: 3, Retention: Month / 2, CompressionRatio: 5}
	// 1 GiB and a million spans: 1 + 2 + 3 × 0.5 / 5.
	assert.InDelta(t, 1+2+0.3, m.Cost(1e6, GiB), 1e-12)
}

func TestValidateNamesFields(t *testing.T) {
	neg, nan := -1.0, 0.5
	err := Config{Preset: "gold", PerGiBIngested: &neg, CompressionRatio: &nan}.Validate()
	require.Error(t, err)
	for _, f := range []string{"preset", "per_gib_ingested", "compression_ratio"} {
		assert.Contains(t, err.Error(), f)
	}
	assert.NoError(t, DefaultConfig().Validate())
	assert.Equal(t, []string{PresetManagedIngest, PresetSaaSIndexed, PresetSelfHostedObjectStorage}, PresetNames())
}
