package faults

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSetFieldPatch(t *testing.T) {
	typ, patch, err := setFieldPatch("spec.replicas", int64(3))
	require.NoError(t, err)
	require.Equal(t, "application/merge-patch+json", typ)
	require.JSONEq(t, `{"spec":{"replicas":3}}`, string(patch))

	typ, patch, err = setFieldPatch("spec.workerGroupSpecs[0].replicas", int64(2))
	require.NoError(t, err)
	require.Equal(t, "application/json-patch+json", typ)
	require.JSONEq(t, `[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":2}]`, string(patch))

	names, err := fieldNames("metadata.labels[ray.io/group]")
	require.NoError(t, err)
	require.Equal(t, []string{"metadata", "labels", "ray.io/group"}, names)

	_, err = fieldNames("spec.workerGroupSpecs[0].replicas")
	require.ErrorContains(t, err, `field path "spec.workerGroupSpecs[0].replicas" indexes a list`)
	for _, bad := range []string{"", "spec.", "spec..replicas", "spec[0", "spec[]"} {
		_, err := parseFieldPath(bad)
		require.Error(t, err, bad)
	}
}

func TestOptionsValidate(t *testing.T) {
	require.ErrorContains(t, ContainerKill(ContainerKillOptions{Selector: "a in (b"}).(containerKill).Validate(), `ContainerKill: the pod selector "a in (b"`)
	require.ErrorContains(t, ConflictingWriter(ConflictOptions{Field: "spec.groups[0].replicas"}).(conflictingWriter).Validate(), "server-side apply takes a list whole")
	require.ErrorContains(t, ScaleChange(ScaleOptions{Field: "spec..replicas"}).(scaleChange).Validate(), "an empty field name")
	require.NoError(t, ScaleChange(ScaleOptions{Field: "spec.workerGroupSpecs[0].replicas"}).(scaleChange).Validate())
	require.Equal(t, "ContainerKill{Pod: 1, ExitCode: 137, Selector: a=b}", Format(ContainerKillStep{Pod: 1, ExitCode: 137, Selector: "a=b"}))
	require.Equal(t, "ContainerKill{Pod: 1, ExitCode: 137}", Format(ContainerKillStep{Pod: 1, ExitCode: 137}))
}
