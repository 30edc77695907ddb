// Package semconvtest is an empty stub; see go.mod.
package semconvtest
