package main

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGoTestFlagsRefused: of the flags given, go test's -kubeprop.* and
// -rapid.* are named (the demo reads none); its own are not.
func TestGoTestFlagsRefused(t *testing.T) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("kubeprop.replay", "", "")
	fs.Int("kubeprop.checks", 0, "")
	fs.Int("rapid.checks", 100, "")
	fs.Int("checks", 0, "")
	require.NoError(t, fs.Parse([]string{"-checks", "3", "-kubeprop.replay", "x.yaml", "-rapid.checks", "5"}))
	require.Equal(t, []string{"-kubeprop.replay", "-rapid.checks"}, goTestFlags(fs))

	fs = flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.Int("checks", 0, "")
	fs.String("kubeprop.replay", "", "")
	require.NoError(t, fs.Parse([]string{"-checks", "3"}))
	require.Empty(t, goTestFlags(fs))
}
