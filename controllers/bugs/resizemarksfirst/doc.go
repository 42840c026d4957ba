// Package resizemarksfirst is the Database operator with a seeded bug: it
// records a volume growth before it makes it. It writes status.storage =
// spec.storage first, then grows the claims and re-creates the
// StatefulSet, and it decides whether to grow from status.storage !=
// spec.storage instead of from the StatefulSet's template as observed.
//
// Bug class: intermediate state, a record written ahead of the change it
// records. Revealed by CrashAfterWrite right after that status write,
// before a storage change is carried out ([CrashAfterWrite{Verb: update,
// Resource: databases/status, Writes: 1}, StorageChange]): the next
// instance reads the record, finds nothing to do, and the claims and the
// template stay small for good. Caught by Converges(converges).
package resizemarksfirst
