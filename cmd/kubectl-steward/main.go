// Command kubectl-steward is Steward's kubectl plugin: put it on PATH and run `kubectl steward`. It shows an
// EtcdCluster's state and runs day-2 actions by creating or patching Steward's resources; see
// docs/reference/plugin.md.
package main

import (
	"os"

	"steward.dev/steward/cmd/kubectl-steward/internal/cli"
)

func main() {
	os.Exit(cli.Main())
}
