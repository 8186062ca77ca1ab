"""The HTTP service of proton-survey: the Availability matrix and the evidence
behind it, one URL per resource in several formats (HTML, ``.json``, ``.csv``,
``.md``), plus the upload of probe reports. ``api.app.create_app`` builds it."""
