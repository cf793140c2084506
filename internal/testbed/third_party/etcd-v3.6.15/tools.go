//go:build tools

// Package tools pins the etcd commands the test bed builds: the server, etcdctl and etcdutl.
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
