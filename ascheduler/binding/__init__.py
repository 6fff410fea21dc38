"""Binding: the bind-phase protocol under node locks (`ascheduler.locks`), and BindRequests."""
