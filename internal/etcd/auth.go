package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"steward.dev/steward/internal/etcdauth"
)

// AuthEnabled reports whether the cluster enforces authentication.
func (p *Pool) AuthEnabled(ctx context.Context, key string, endpoints []string) (bool, error) {
	var enabled bool
	err := p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		resp, err := c.AuthStatus(ctx)
		if isPermissionDenied(err) {
			// etcd answers AuthStatus to root alone while authentication is on, and checks no permission while
			// it is off: a user without the root role (an adoption source's credentials) learns it this way.
			enabled = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("auth status: %w", err)
		}
		enabled = resp.Enabled
		return nil
	})
	return enabled, err
}

// EnableAuth makes sure the root user exists without a password and holds the root role (etcd's precondition,
// and the identity of Steward's client certificate), grants the root role to the extra identities (the common
// name of a client certificate the user provides), makes the operator's password user (when it has one: a
// cluster without TLS) with its password and the root role, and enables authentication. Each step is
// idempotent.
func (p *Pool) EnableAuth(ctx context.Context, key string, endpoints []string, operator Password, extraRoots ...string) error {
	return p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		for _, user := range append([]string{etcdauth.RootUser}, extraRoots...) {
			if err := ensureNoPasswordUser(ctx, c, user); err != nil {
				return err
			}
			if _, err := c.UserGrantRole(ctx, user, etcdauth.RootRole); err != nil {
				return fmt.Errorf("grant role root to %s: %w", user, err)
			}
		}
		if operator != (Password{}) {
			if err := ensureRootPasswordUser(ctx, c, operator); err != nil {
				return err
			}
		}
		if _, err := c.AuthEnable(ctx); err != nil {
			return fmt.Errorf("enable auth: %w", err)
		}
		return nil
	})
}

// DisableAuth turns authentication off. Users and roles stay, ready for the next EnableAuth.
func (p *Pool) DisableAuth(ctx context.Context, key string, endpoints []string) error {
	return p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		if _, err := c.AuthDisable(ctx); err != nil {
			return fmt.Errorf("disable auth: %w", err)
		}
		return nil
	})
}

// EnsureOperatorUser makes the operator's password user with its password and the root role, through the
// pooled client's certificate (etcd refused the password, so the client acts with its certificate), then drops
// the pooled client, so that the next call authenticates with the password.
func (p *Pool) EnsureOperatorUser(ctx context.Context, key string, endpoints []string, operator Password) error {
	err := p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		return ensureRootPasswordUser(ctx, c, operator)
	})
	if err != nil {
		return err
	}
	p.Redial(key)
	return nil
}

// ensureRootPasswordUser makes user pw.User anew with password pw.Password and the root role. Deleted first when it
// exists: etcd keeps a user made without a password password-less whatever password it is given, and the
// user's old grants are not Steward's to keep. Only called while auth is off or through a certificate, so
// nothing is authenticated as that user meanwhile.
func ensureRootPasswordUser(ctx context.Context, c *clientv3.Client, pw Password) error {
	if _, err := c.UserDelete(ctx, pw.User); err != nil && !errors.Is(err, rpctypes.ErrUserNotFound) {
		return fmt.Errorf("delete user %s: %w", pw.User, err)
	}
	if _, err := c.UserAdd(ctx, pw.User, pw.Password); err != nil {
		return fmt.Errorf("add user %s: %w", pw.User, err)
	}
	if _, err := c.UserGrantRole(ctx, pw.User, etcdauth.RootRole); err != nil {
		return fmt.Errorf("grant role root to %s: %w", pw.User, err)
	}
	return nil
}

func ensureNoPasswordUser(ctx context.Context, c *clientv3.Client, name string) error {
	_, err := c.UserAddWithOptions(ctx, name, "", &clientv3.UserAddOptions{NoPassword: true})
	if err != nil && !errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		return fmt.Errorf("add user %s: %w", name, err)
	}
	return nil
}

// ObserveUser reads what etcd holds for user name: whether it exists, its roles, and the permissions of the role
// named like it; and the names of every role in etcd.
func (p *Pool) ObserveUser(ctx context.Context, key string, endpoints []string, name string) (etcdauth.Observed, map[string]bool, error) {
	var observed etcdauth.Observed
	roles := map[string]bool{}
	err := p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		list, err := c.RoleList(ctx)
		if err != nil {
			return fmt.Errorf("list roles: %w", err)
		}
		for _, r := range list.Roles {
			roles[r] = true
		}
		user, err := c.UserGet(ctx, name)
		switch {
		case errors.Is(err, rpctypes.ErrUserNotFound):
		case err != nil:
			return fmt.Errorf("get user %s: %w", name, err)
		default:
			observed.UserExists, observed.Roles = true, user.Roles
		}
		if !roles[name] {
			return nil
		}
		role, err := c.RoleGet(ctx, name)
		if err != nil {
			return fmt.Errorf("get role %s: %w", name, err)
		}
		observed.RoleExists = true
		for _, perm := range role.Perm {
			observed.Permissions = append(observed.Permissions, etcdauth.Permission{
				Key: string(perm.Key), RangeEnd: string(perm.RangeEnd), Access: etcdauth.Access(perm.PermType)})
		}
		return nil
	})
	return observed, roles, err
}

// ApplyUser makes ops on user's entries, in order; password is set where an op asks for it.
func (p *Pool) ApplyUser(ctx context.Context, key string, endpoints []string, user etcdauth.User, ops []etcdauth.Op, password string) error {
	return p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		for _, op := range ops {
			if err := applyOp(ctx, c, user.Name, op, password); err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
		}
		return nil
	})
}

func applyOp(ctx context.Context, c *clientv3.Client, name string, op etcdauth.Op, password string) error {
	var err error
	switch op.Kind {
	case etcdauth.AddUser:
		if password != "" {
			_, err = c.UserAdd(ctx, name, password)
		} else {
			_, err = c.UserAddWithOptions(ctx, name, "", &clientv3.UserAddOptions{NoPassword: true})
		}
		if errors.Is(err, rpctypes.ErrUserAlreadyExist) {
			err = nil
		}
	case etcdauth.DeleteUser:
		if _, err = c.UserDelete(ctx, name); errors.Is(err, rpctypes.ErrUserNotFound) {
			err = nil
		}
	case etcdauth.SetPassword:
		_, err = c.UserChangePassword(ctx, name, password)
	case etcdauth.AddRole:
		if _, err = c.RoleAdd(ctx, op.Role); errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
			err = nil
		}
	case etcdauth.GrantPermission:
		_, err = c.RoleGrantPermission(ctx, op.Role, op.Permission.Key, op.Permission.RangeEnd,
			clientv3.PermissionType(authpb.Permission_Type(op.Permission.Access)))
	case etcdauth.RevokePermission:
		_, err = c.RoleRevokePermission(ctx, op.Role, op.Permission.Key, op.Permission.RangeEnd)
	case etcdauth.GrantRole:
		_, err = c.UserGrantRole(ctx, name, op.Role)
	case etcdauth.RevokeRole:
		_, err = c.UserRevokeRole(ctx, name, op.Role)
	case etcdauth.DeleteRole:
		if _, err = c.RoleDelete(ctx, op.Role); errors.Is(err, rpctypes.ErrRoleNotFound) {
			err = nil
		}
	default:
		err = fmt.Errorf("unknown auth change %q", op.Kind)
	}
	return err
}

// DeleteUser deletes user name if it exists, and with withRole the role named like it.
func (p *Pool) DeleteUser(ctx context.Context, key string, endpoints []string, name string, withRole bool) error {
	return p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		if _, err := c.UserDelete(ctx, name); err != nil && !errors.Is(err, rpctypes.ErrUserNotFound) {
			return fmt.Errorf("delete user %s: %w", name, err)
		}
		if !withRole {
			return nil
		}
		if _, err := c.RoleDelete(ctx, name); err != nil && !errors.Is(err, rpctypes.ErrRoleNotFound) {
			return fmt.Errorf("delete role %s: %w", name, err)
		}
		return nil
	})
}

// UserNames lists etcd's users.
func (p *Pool) UserNames(ctx context.Context, key string, endpoints []string) ([]string, error) {
	var names []string
	err := p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		resp, err := c.UserList(ctx)
		if err != nil {
			return fmt.Errorf("list users: %w", err)
		}
		names = resp.Users
		return nil
	})
	return names, err
}

// UserRoles lists the roles of etcd user name. etcd answers a user about itself without the root role, so this
// tells whether the user the pool acts as holds it.
func (p *Pool) UserRoles(ctx context.Context, key string, endpoints []string, name string) ([]string, error) {
	var roles []string
	err := p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		resp, err := c.UserGet(ctx, name)
		if err != nil {
			return fmt.Errorf("get user %s: %w", name, err)
		}
		roles = resp.Roles
		return nil
	})
	return roles, err
}

// isPermissionDenied reports whether err is etcd's refusal of a call the authenticated user may not make.
func isPermissionDenied(err error) bool {
	return err != nil && (errors.Is(rpctypes.Error(err), rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrPermissionDenied))
}

// AuthStore reads every role of etcd's auth store with its permissions, and every user with its roles: what a
// standby's fence is planned from (etcdauth.Fence, etcdauth.Unfence).
func (p *Pool) AuthStore(ctx context.Context, key string, endpoints []string) ([]etcdauth.Role, []etcdauth.UserRoles, error) {
	var roles []etcdauth.Role
	var users []etcdauth.UserRoles
	err := p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		roles, users = nil, nil
		roleList, err := c.RoleList(ctx)
		if err != nil {
			return fmt.Errorf("list roles: %w", err)
		}
		for _, name := range roleList.Roles {
			resp, err := c.RoleGet(ctx, name)
			if err != nil {
				return fmt.Errorf("get role %s: %w", name, err)
			}
			role := etcdauth.Role{Name: name}
			for _, perm := range resp.Perm {
				role.Permissions = append(role.Permissions, etcdauth.Permission{
					Key: string(perm.Key), RangeEnd: string(perm.RangeEnd), Access: etcdauth.Access(perm.PermType)})
			}
			roles = append(roles, role)
		}
		userList, err := c.UserList(ctx)
		if err != nil {
			return fmt.Errorf("list users: %w", err)
		}
		for _, name := range userList.Users {
			resp, err := c.UserGet(ctx, name)
			if err != nil {
				return fmt.Errorf("get user %s: %w", name, err)
			}
			users = append(users, etcdauth.UserRoles{Name: name, Roles: resp.Roles})
		}
		return nil
	})
	return roles, users, err
}

// ApplyFence makes a fence's (or its undoing's) calls, in order, stopping at the first etcd refuses: the caller
// plans the rest again from etcd's roles and users and the fence's record (etcdauth.Fence, etcdauth.Unfence).
func (p *Pool) ApplyFence(ctx context.Context, key string, endpoints []string, ops []etcdauth.FenceOp) error {
	return p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		for _, op := range ops {
			if err := applyOp(ctx, c, op.User, op.Op, ""); err != nil {
				if op.User != "" {
					return fmt.Errorf("%s of user %s: %w", op.Op, op.User, err)
				}
				return fmt.Errorf("%s: %w", op.Op, err)
			}
		}
		return nil
	})
}
