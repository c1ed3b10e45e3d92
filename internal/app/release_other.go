//go:build !linux

package app

// releaseStartupPages does nothing outside Linux.
func releaseStartupPages() {}
