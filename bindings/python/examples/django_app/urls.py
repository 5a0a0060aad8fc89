from django.http import JsonResponse
from django.urls import path
import floodwall.django

def hello(request):
    return JsonResponse({"hello": "world"})

def order(request, id):  # the "orders" rule: its route family is "/orders/:id"
    return JsonResponse({"order": id})

@floodwall.django.limit(cost=5)  # an expensive view spends 5 tokens
def report(request):
    return JsonResponse({"report": "ready"})

urlpatterns = [path("hello", hello), path("orders/<int:id>/", order), path("report", report)]
