package harness_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubeprop/kubeprop/harness"
)

// TestDialContext: the dialer an in-process controller uses refuses pod
// and Service addresses at once, as a binary's network namespace does,
// and dials anything else.
func TestDialContext(t *testing.T) {
	ctx := context.Background()
	for _, addr := range []string{"198.18.0.9:5432", "198.19.3.1:80", "10.0.0.1:443", "[::ffff:198.18.0.9]:80"} {
		start := time.Now()
		conn, err := harness.DialContext(ctx, "tcp", addr)
		require.Nil(t, conn)
		require.ErrorIs(t, err, syscall.ENETUNREACH, addr)
		require.ErrorContains(t, err, "connect: network is unreachable")
		require.Less(t, time.Since(start), time.Second, "refused at once")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	conn, err := harness.DialContext(ctx, "tcp", l.Addr().String())
	require.NoError(t, err)
	conn.Close()
	var op *net.OpError
	_, err = harness.DialContext(ctx, "tcp", "198.18.0.9:80")
	require.True(t, errors.As(err, &op), "a *net.OpError, as net.Dialer returns")
}
