"""Neural building blocks shared by the nuisance stage, the policies and serving: stacked MLPs, the
interval networks, the training objectives and the training loop. Imports torch and nothing of the project."""
