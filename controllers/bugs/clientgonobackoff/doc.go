// Package clientgonobackoff is the client-go PodSet controller
// (controllers/clientgopodset) with a seeded bug: a key whose sync failed
// goes back into the workqueue with Add, not AddRateLimited.
//
// Bug class: retry without back-off, the classic workqueue slip. Revealed
// by APIErrors while there is something to write. Caught by BoundedBackoff
// (far more refused requests than an exponential back-off allows).
package clientgonobackoff
