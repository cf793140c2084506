//go:build tools

// Package prometheus pins the Prometheus server the test bed runs (its go.mod requires the release; the test
// bed builds github.com/prometheus/prometheus/cmd/prometheus from here).
package prometheus

import _ "github.com/prometheus/prometheus/cmd/prometheus"
