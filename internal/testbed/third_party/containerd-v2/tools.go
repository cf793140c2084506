//go:build tools

// Package tools pins the containerd 2 commands the test bed builds when told to run containerd 2
// (STEWARD_TESTBED_CONTAINERD=2): the daemon, its runc shim and ctr.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
