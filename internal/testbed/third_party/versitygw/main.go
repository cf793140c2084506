//go:build tools

// Package tools pins the Versity S3 Gateway for the test bed: a real S3-compatible server over a POSIX
// directory that backup tests upload to and read back from. The test bed builds
// github.com/versity/versitygw/cmd/versitygw from this module.
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
