package etcdapi

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// authService implements etcd's Auth service as an etcd whose auth is
// disabled answers it. kvd has no users or roles: its own TLS client
// certificates (read-write or read-only) and shared-key authentication
// apply to every request instead, on the node's listener.
type authService struct {
	pb.UnimplementedAuthServer
	s *Server
}

const noUsers = "kvd has no users or roles; its TLS client certificates (read-write or read-only) apply instead"

func (a *authService) AuthStatus(context.Context, *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	return &pb.AuthStatusResponse{Header: a.s.header(0), Enabled: false}, nil
}

// Authenticate fails as etcd's does with auth disabled; clientv3 given a
// user name then goes on without a token.
func (a *authService) Authenticate(context.Context, *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	return nil, rpctypes.ErrGRPCAuthNotEnabled
}

// AuthDisable succeeds: auth is disabled, as etcd answers when it already
// is.
func (a *authService) AuthDisable(context.Context, *pb.AuthDisableRequest) (*pb.AuthDisableResponse, error) {
	return &pb.AuthDisableResponse{Header: a.s.header(0)}, nil
}

func (a *authService) AuthEnable(context.Context, *pb.AuthEnableRequest) (*pb.AuthEnableResponse, error) {
	return nil, notSupported("AuthEnable", noUsers)
}

func (a *authService) UserAdd(context.Context, *pb.AuthUserAddRequest) (*pb.AuthUserAddResponse, error) {
	return nil, notSupported("UserAdd", noUsers)
}

func (a *authService) UserGet(context.Context, *pb.AuthUserGetRequest) (*pb.AuthUserGetResponse, error) {
	return nil, notSupported("UserGet", noUsers)
}

func (a *authService) UserList(context.Context, *pb.AuthUserListRequest) (*pb.AuthUserListResponse, error) {
	return nil, notSupported("UserList", noUsers)
}

func (a *authService) UserDelete(context.Context, *pb.AuthUserDeleteRequest) (*pb.AuthUserDeleteResponse, error) {
	return nil, notSupported("UserDelete", noUsers)
}

func (a *authService) UserChangePassword(context.Context, *pb.AuthUserChangePasswordRequest) (*pb.AuthUserChangePasswordResponse, error) {
	return nil, notSupported("UserChangePassword", noUsers)
}

func (a *authService) UserGrantRole(context.Context, *pb.AuthUserGrantRoleRequest) (*pb.AuthUserGrantRoleResponse, error) {
	return nil, notSupported("UserGrantRole", noUsers)
}

func (a *authService) UserRevokeRole(context.Context, *pb.AuthUserRevokeRoleRequest) (*pb.AuthUserRevokeRoleResponse, error) {
	return nil, notSupported("UserRevokeRole", noUsers)
}

func (a *authService) RoleAdd(context.Context, *pb.AuthRoleAddRequest) (*pb.AuthRoleAddResponse, error) {
	return nil, notSupported("RoleAdd", noUsers)
}

func (a *authService) RoleGet(context.Context, *pb.AuthRoleGetRequest) (*pb.AuthRoleGetResponse, error) {
	return nil, notSupported("RoleGet", noUsers)
}

func (a *authService) RoleList(context.Context, *pb.AuthRoleListRequest) (*pb.AuthRoleListResponse, error) {
	return nil, notSupported("RoleList", noUsers)
}

func (a *authService) RoleDelete(context.Context, *pb.AuthRoleDeleteRequest) (*pb.AuthRoleDeleteResponse, error) {
	return nil, notSupported("RoleDelete", noUsers)
}

func (a *authService) RoleGrantPermission(context.Context, *pb.AuthRoleGrantPermissionRequest) (*pb.AuthRoleGrantPermissionResponse, error) {
	return nil, notSupported("RoleGrantPermission", noUsers)
}

func (a *authService) RoleRevokePermission(context.Context, *pb.AuthRoleRevokePermissionRequest) (*pb.AuthRoleRevokePermissionResponse, error) {
	return nil, notSupported("RoleRevokePermission", noUsers)
}
