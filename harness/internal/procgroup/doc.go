// Package procgroup runs a process in a process group of its own, as the
// hollow cluster's control-plane children and harness.Process's controller
// binaries run: a terminal's ^C, which goes to the whole foreground group,
// reaches the harness alone, which stops them in order; a stop or a kill
// reaches whatever the process started too.
package procgroup
