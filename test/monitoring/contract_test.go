package monitoring

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// contractFile is the metrics contract: the rows of docs/reference/metrics.md's tables that name a steward_ metric,
// each with its labels. internal/metrics' scrape test reads the same rows (its contract_test.go) and checks the
// code against them, so the rules and the dashboard checked here are checked against what Steward exports.
const contractFile = "../../docs/reference/metrics.md"

// mustReadContract is the contract's metrics with their labels.
func mustReadContract() map[string][]string {
	c, err := readContract(contractFile)
	if err != nil {
		panic(err)
	}
	return c
}

// readContract reads the metric rows of the contract's tables: "| `name` | label, label | ...".
func readContract(path string) (map[string][]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `steward_") {
			continue
		}
		cells := strings.Split(line, "|")
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: %s listed twice", path, name)
		}
		out[name] = strings.Split(strings.TrimSpace(cells[2]), ", ")
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no metric rows", path)
	}
	return out, nil
}

// TestContractIsRead: the contract's rows are read with their labels.
func TestContractIsRead(t *testing.T) {
	if labels := contractMetrics["steward_backup_schedule_claim_info"]; strings.Join(labels, ",") != "namespace,schedule,cluster,persistentvolumeclaim" {
		t.Fatalf("steward_backup_schedule_claim_info has labels %q in the contract", labels)
	}
}
