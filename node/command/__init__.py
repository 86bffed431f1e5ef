"""What every Keel command and process entry point shares: the one error path and its exit
statuses (`entry`), argument types that refuse bad values before anything starts (`options`),
and output for people and scripts (`output`)."""
