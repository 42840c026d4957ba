//go:build !linux

package harness_test

// canCreateNetworkNamespace: network namespaces are Linux's.
func canCreateNetworkNamespace() bool { return false }
