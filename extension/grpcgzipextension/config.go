package grpcgzipextension // import "github.com/otelcol-cost/otelcol-cost/extension/grpcgzipextension"

import "fmt"

// Config sets the gzip level of every gRPC client of the collector that is
// configured with `compression: gzip` (the otlp and load_balancing
// exporters): configgrpc has no level option of its own.
type Config struct {
	// Level trades CPU for bytes: 1 is the fastest, 9 the smallest.
	Level int `mapstructure:"level"`
}

func createDefaultConfig() *Config {
	return &Config{Level: DefaultLevel}
}

// Validate checks the level before anything starts.
func (c *Config) Validate() error {
	if c.Level < 1 || c.Level > 9 {
		return fmt.Errorf("level: must be between 1 (fastest) and 9 (smallest), got %d", c.Level)
	}
	return nil
}
