//go:build tools

// Package tools pins cert-manager for the test bed: its controller issues the certificates of provider
// CertManager clusters in end-to-end tests. The test bed builds github.com/cert-manager/cert-manager/cmd/controller
// from this module and installs the CRDs of the same module version (deploy/crds).
//
// v1.11 is the newest release whose controller command lives in the main module: from v1.12 on it is a module
// of its own (github.com/cert-manager/cert-manager/controller-binary) that the Go module proxy does not serve.
// Steward uses only cert-manager.io/v1 Certificates, which v1.11 serves as later releases do.
package tools

import _ "github.com/cert-manager/cert-manager/cmd/controller"
