// Package observedafter is the Database operator with a seeded bug: it
// brings the StatefulSet's spec to the Database's only when
// status.observedGeneration differs from metadata.generation (both read
// fresh from the API server), and before it writes its status it waits
// for the StatefulSet to roll the change out, reads the Database again,
// fresh ("to avoid conflicts"), and reports that copy's generation as
// observed.
//
// Bug class: unobserved state, a generation marked observed that no
// reconcile acted on. Revealed by two changes of spec.replicas less than
// a roll-out apart (a burst of user changes with no settle between
// them: [Burst{Steps: [ScaleChange 5, ScaleChange 2], GapMs: 200}]): the
// reconcile acts on the first, marks the second observed, and no later
// reconcile touches the StatefulSet, which keeps the first value. A burst
// whose second change comes before the reconcile read the first (a gap of
// a few milliseconds or none) shows nothing: the reconcile acts on the
// second. Caught by Converges(converges).
package observedafter
