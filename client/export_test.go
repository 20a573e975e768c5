package client

// WithDefaults is c as New uses it: its unset fields set to their defaults.
func WithDefaults(c Config) Config { return c.withDefaults() }
