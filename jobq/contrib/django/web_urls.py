"""The status page's URLs, to include behind the admin's staff login (see web.py):

path("jobq/", include("jobq.contrib.django.web_urls")),
"""

from django.urls import re_path

from .web import console

app_name = "jobq"
urlpatterns = [re_path(r"^(?P<rest>.*)$", console, name="console")]
