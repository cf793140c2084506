package metrics

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// contractFile is the metrics contract: the rows of docs/reference/metrics.md's tables that name a steward_ metric,
// each with its labels. It is the one list of Steward's metrics: this package's scrape test checks the code
// against it and test/monitoring (contract.go, the same reading) the alerts and the dashboard; the kubectl plugin
// is written against it.
const contractFile = "../../docs/reference/metrics.md"

// contract is every metric of the contract with its labels.
var contract = func() map[string][]string {
	c, err := readContract(contractFile)
	if err != nil {
		panic(err)
	}
	return c
}()

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

// TestContractIsRead: the contract's rows are read with their labels (a table reshaped in the page would
// otherwise leave the scrape test comparing against nothing).
func TestContractIsRead(t *testing.T) {
	if labels := contract["steward_cluster_version_info"]; strings.Join(labels, ",") != "namespace,cluster,desired_version,current_version,cluster_version" {
		t.Fatalf("steward_cluster_version_info has labels %q in the contract", labels)
	}
	if labels := contract["steward_restores_total"]; strings.Join(labels, ",") != "namespace,cluster,result,reason" {
		t.Fatalf("steward_restores_total has labels %q in the contract", labels)
	}
}
