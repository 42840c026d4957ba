// Package controllers holds the controllers kubeprop tests itself on:
// podset (a correct controller-runtime controller), its seeded-bug
// variants under bugs/, and the conformance suite (suite/, and the tests
// here) that must pass the correct ones and catch every bug.
package controllers
