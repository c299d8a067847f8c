"""Support used by every room above it and importing none of them: atomic files (`fsio`), file locks
(`filelocks`), URLs and their credentials (`urls`), TOML a person wrote (`tomltext`), merge-conflict
markers (`conflicts`), the first error of a traceback (`firsterror`), and start-up tuning (`gctune`,
`httpmods`, `pydanticplugins`)."""
