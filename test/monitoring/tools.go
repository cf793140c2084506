//go:build tools

package monitoring

// Importing promtool's command keeps it in go.mod and go.sum, so that the tests (and `make promtool`) build the
// promtool of the Prometheus whose packages these tests link, at the version go.mod pins.
import _ "github.com/prometheus/prometheus/cmd/promtool"
