package etcd

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Password is an etcd user and its password a client authenticates with, besides (or, on a plaintext
// cluster, instead of) a client certificate. The zero value is none.
type Password struct {
	User, Password string
}

// ErrPasswordRejected says etcd does not know the user or password a client presented, and the client has no
// certificate to act with instead.
var ErrPasswordRejected = errors.New("etcd refused the password")

// dial creates a client with cfg, authenticating with pw when it has one (while auth is off, etcd takes any).
// etcd refuses a password it does not know: a store restored from another cluster's backup, or a password user
// not made yet. dial then connects without it, so that a client certificate can still identify the caller and
// calls that need no identity (status, member list) still work, and reports rejected.
func dial(cfg clientv3.Config, pw Password) (c *clientv3.Client, rejected bool, err error) {
	if pw.User != "" && pw.Password != "" {
		withPassword := cfg
		withPassword.Username, withPassword.Password = pw.User, pw.Password
		c, err := clientv3.New(withPassword)
		if err == nil {
			return c, false, nil
		}
		if !isAuthFailed(err) {
			return nil, false, err
		}
		rejected = true
	}
	c, err = clientv3.New(cfg)
	return c, rejected, err
}

// isAuthFailed reports whether err is etcd's refusal of a user name and password.
func isAuthFailed(err error) bool {
	return errors.Is(rpctypes.Error(err), rpctypes.ErrAuthFailed) || errors.Is(err, rpctypes.ErrAuthFailed)
}
