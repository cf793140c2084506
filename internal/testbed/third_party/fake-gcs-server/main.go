//go:build tools

// Package tools pins fake-gcs-server for the test bed: an emulator of Google Cloud Storage's JSON API that
// backup tests upload to and read back from. The test bed builds github.com/fsouza/fake-gcs-server from this
// module.
package tools

import _ "github.com/fsouza/fake-gcs-server"
