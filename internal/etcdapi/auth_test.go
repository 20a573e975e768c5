package etcdapi_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvd-project/kvd/internal/etcdapi"
)

// TestAuthAnswersAsDisabled: the Auth service answers as an etcd whose
// auth is disabled, and refuses users and roles as not supported.
func TestAuthAnswersAsDisabled(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := e.etcd.AuthStatus(ctx)
	if err != nil || st.Enabled {
		t.Fatalf("AuthStatus = %+v, %v; want disabled", st, err)
	}
	if _, err := e.etcd.AuthDisable(ctx); err != nil {
		t.Errorf("AuthDisable = %v; want success (auth is disabled)", err)
	}
	if _, err := e.etcd.Authenticate(ctx, "root", "pw"); !errors.Is(err, rpctypes.ErrAuthNotEnabled) {
		t.Errorf("Authenticate = %v; want %v", err, rpctypes.ErrAuthNotEnabled)
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"AuthEnable", func() error { _, err := e.etcd.AuthEnable(ctx); return err }},
		{"UserAdd", func() error { _, err := e.etcd.UserAdd(ctx, "u", "p"); return err }},
		{"UserGet", func() error { _, err := e.etcd.UserGet(ctx, "u"); return err }},
		{"UserList", func() error { _, err := e.etcd.UserList(ctx); return err }},
		{"UserDelete", func() error { _, err := e.etcd.UserDelete(ctx, "u"); return err }},
		{"UserChangePassword", func() error { _, err := e.etcd.UserChangePassword(ctx, "u", "p"); return err }},
		{"UserGrantRole", func() error { _, err := e.etcd.UserGrantRole(ctx, "u", "r"); return err }},
		{"UserRevokeRole", func() error { _, err := e.etcd.UserRevokeRole(ctx, "u", "r"); return err }},
		{"RoleAdd", func() error { _, err := e.etcd.RoleAdd(ctx, "r"); return err }},
		{"RoleGet", func() error { _, err := e.etcd.RoleGet(ctx, "r"); return err }},
		{"RoleList", func() error { _, err := e.etcd.RoleList(ctx); return err }},
		{"RoleDelete", func() error { _, err := e.etcd.RoleDelete(ctx, "r"); return err }},
		{"RoleGrantPermission", func() error {
			_, err := e.etcd.RoleGrantPermission(ctx, "r", "a", "b", clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		}},
		{"RoleRevokePermission", func() error { _, err := e.etcd.RoleRevokePermission(ctx, "r", "a", "b"); return err }},
	} {
		if err := tc.call(); status.Code(err) != codes.Unimplemented {
			t.Errorf("%s = %v; want Unimplemented (not supported)", tc.name, err)
		}
	}
}
