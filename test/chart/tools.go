//go:build tools

package chart

// Importing Helm's command keeps it in go.mod and go.sum, so that `make helm` builds the Helm whose packages
// these tests link, at the version go.mod pins.
import _ "helm.sh/helm/v3/cmd/helm"
