"""The test project with the admin and its login, and jobq's console mounted behind it
(project/console_urls.py), for
`manage.py test project.console_tests --settings=project.console_settings`."""

from __future__ import annotations

from .settings import *  # noqa: F403
from .settings import INSTALLED_APPS

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    *INSTALLED_APPS,
]
# No CsrfViewMiddleware, on purpose: the console checks Django's token by itself.
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "project.console_urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
# As many projects do: each view in a transaction. The console's actions must still apply.
DATABASES["default"]["ATOMIC_REQUESTS"] = True  # noqa: F405
