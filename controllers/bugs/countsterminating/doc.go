// Package countsterminating is the PodSet controller with a seeded bug:
// it counts terminating pods as healthy replicas.
//
// Bug class: a wrong notion of "alive". Revealed by NodeLoss: the taint
// manager evicts the lost node's pods, which stay terminating because no
// kubelet confirms their end; the controller counts them and never
// creates replacements. Caught by Converges (never all replicas ready).
package countsterminating
