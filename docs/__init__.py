"""The documentation site's build hooks (see hooks.py); the pages are the Markdown files."""
